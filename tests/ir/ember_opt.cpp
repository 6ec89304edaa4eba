// ember-opt: parse IR text, run passes, print the result (like mlir-opt).
//   ember-opt --passes=cse,dce file.ir
//   ember-opt --file-passes file.ir      (passes from the file's "// PASSES: a,b" line)
#include <fstream>
#include <iostream>
#include <sstream>

#include "ir/error.h"
#include "ir/graph.h"
#include "passes/pipeline.h"

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t first = item.find_first_not_of(" \t"), last = item.find_last_not_of(" \t");
    if (first != std::string::npos) out.push_back(item.substr(first, last - first + 1));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string passes, file;
  bool from_file = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--passes=", 0) == 0) passes = a.substr(9);
    else if (a == "--file-passes") from_file = true;
    else file = a;
  }
  if (file.empty()) {
    std::cerr << "usage: ember-opt [--passes=a,b | --file-passes] file.ir\n";
    return 2;
  }
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  if (from_file) {
    std::string line;
    std::istringstream lines(text.str());
    while (std::getline(lines, line))
      if (auto at = line.find("// PASSES:"); at != std::string::npos) passes = line.substr(at + 10);
  }
  try {
    auto g = ember::parse_graph(text.str());
    ember::Pipeline(split(passes)).run(*g);
    std::cout << ember::print(*g);
  } catch (const ember::Error& e) {
    std::cout << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
