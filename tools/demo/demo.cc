// The main job (tools/dev demo). Filled in as the stages land.
#include <cstdio>
int main() {
  std::printf("mlajit demo: nothing to run yet\n");
  return 0;
}
