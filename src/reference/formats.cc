// Number formats; see formats.h.
namespace mlajit {}
