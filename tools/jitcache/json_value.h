// A small JSON reader for jitcache, which sees the library only through its C
// ABI and so reads the JSON documents that the mlajit_cache_*_json calls return.
// Header-only so that tests can read the tool's --json output with it too.
//
//   std::optional<JsonValue> v = ParseJson(text, &error);
//   for (const JsonValue& e : (*v)["entries"].items()) std::cout << e["key"].str();
#ifndef MLAJIT_TOOLS_JITCACHE_JSON_VALUE_H_
#define MLAJIT_TOOLS_JITCACHE_JSON_VALUE_H_

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mlajit::tools {

class JsonValue {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool boolean() const { return type_ == Type::kBool && bool_; }
  // Integers are kept exactly (sizes, timestamps); fractions via number().
  int64_t integer() const { return type_ == Type::kNumber ? std::strtoll(text_.c_str(), nullptr, 10) : 0; }
  double number() const { return type_ == Type::kNumber ? std::strtod(text_.c_str(), nullptr) : 0; }
  // The string's value; for numbers, their text.
  const std::string& str() const { return text_; }
  const std::vector<JsonValue>& items() const { return items_; }
  const std::vector<std::pair<std::string, JsonValue>>& members() const { return members_; }
  bool has(const std::string& key) const { return Find(key) != nullptr; }
  // A null value when absent, so lookups chain.
  const JsonValue& operator[](const std::string& key) const {
    static const JsonValue kNull;
    const JsonValue* v = Find(key);
    return v != nullptr ? *v : kNull;
  }

 private:
  friend class JsonParser;
  const JsonValue* Find(const std::string& key) const {
    for (const auto& [k, v] : members_) {
      if (k == key) return &v;
    }
    return nullptr;
  }

  Type type_ = Type::kNull;
  bool bool_ = false;
  std::string text_;
  std::vector<JsonValue> items_;
  std::vector<std::pair<std::string, JsonValue>> members_;
};

class JsonParser {
 public:
  explicit JsonParser(const std::string& text) : s_(text) {}

  std::optional<JsonValue> Parse(std::string* error) {
    JsonValue v;
    if (!Value(&v, 0)) {
      if (error != nullptr) *error = error_ + " at offset " + std::to_string(pos_);
      return std::nullopt;
    }
    Space();
    if (pos_ != s_.size()) {
      if (error != nullptr) *error = "trailing text at offset " + std::to_string(pos_);
      return std::nullopt;
    }
    return v;
  }

 private:
  bool Fail(const char* what) {
    error_ = what;
    return false;
  }
  void Space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' || s_[pos_] == '\r')) ++pos_;
  }
  bool Word(const char* w) {
    size_t n = std::char_traits<char>::length(w);
    if (s_.compare(pos_, n, w) != 0) return false;
    pos_ += n;
    return true;
  }
  bool Value(JsonValue* v, int depth) {
    if (depth > 64) return Fail("nesting too deep");
    Space();
    if (pos_ >= s_.size()) return Fail("unexpected end");
    char c = s_[pos_];
    if (c == '{') return Object(v, depth);
    if (c == '[') return Array(v, depth);
    if (c == '"') {
      v->type_ = JsonValue::Type::kString;
      return String(&v->text_);
    }
    if (Word("true")) {
      v->type_ = JsonValue::Type::kBool;
      v->bool_ = true;
      return true;
    }
    if (Word("false")) {
      v->type_ = JsonValue::Type::kBool;
      return true;
    }
    if (Word("null")) return true;
    size_t start = pos_;
    while (pos_ < s_.size() && std::string("+-0123456789.eE").find(s_[pos_]) != std::string::npos) ++pos_;
    if (pos_ == start) return Fail("unexpected character");
    v->type_ = JsonValue::Type::kNumber;
    v->text_ = s_.substr(start, pos_ - start);
    return true;
  }
  bool Object(JsonValue* v, int depth) {
    v->type_ = JsonValue::Type::kObject;
    ++pos_;
    Space();
    if (pos_ < s_.size() && s_[pos_] == '}') return ++pos_, true;
    while (true) {
      Space();
      std::string key;
      if (pos_ >= s_.size() || s_[pos_] != '"' || !String(&key)) return Fail("expected a member name");
      Space();
      if (pos_ >= s_.size() || s_[pos_++] != ':') return Fail("expected ':'");
      JsonValue member;
      if (!Value(&member, depth + 1)) return false;
      v->members_.emplace_back(std::move(key), std::move(member));
      Space();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == '}') return ++pos_, true;
      return Fail("expected ',' or '}'");
    }
  }
  bool Array(JsonValue* v, int depth) {
    v->type_ = JsonValue::Type::kArray;
    ++pos_;
    Space();
    if (pos_ < s_.size() && s_[pos_] == ']') return ++pos_, true;
    while (true) {
      JsonValue item;
      if (!Value(&item, depth + 1)) return false;
      v->items_.push_back(std::move(item));
      Space();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == ']') return ++pos_, true;
      return Fail("expected ',' or ']'");
    }
  }
  bool String(std::string* out) {
    ++pos_;  // opening quote
    while (pos_ < s_.size()) {
      char c = s_[pos_++];
      if (c == '"') return true;
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) break;
      char e = s_[pos_++];
      switch (e) {
        case 'n': out->push_back('\n'); break;
        case 't': out->push_back('\t'); break;
        case 'r': out->push_back('\r'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'u': {
          if (pos_ + 4 > s_.size()) return Fail("truncated \\u escape");
          unsigned cp = std::strtoul(s_.substr(pos_, 4).c_str(), nullptr, 16);
          pos_ += 4;
          if (cp < 0x80) {
            out->push_back(static_cast<char>(cp));
          } else if (cp < 0x800) {
            out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
            out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
          } else {
            out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
            out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
            out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
          }
          break;
        }
        default: out->push_back(e);  // \" \\ \/
      }
    }
    return Fail("unterminated string");
  }

  const std::string& s_;
  size_t pos_ = 0;
  std::string error_;
};

inline std::optional<JsonValue> ParseJson(const std::string& text, std::string* error = nullptr) {
  return JsonParser(text).Parse(error);
}

}  // namespace mlajit::tools

#endif  // MLAJIT_TOOLS_JITCACHE_JSON_VALUE_H_
