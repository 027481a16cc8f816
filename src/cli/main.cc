// Composition root (being written): parse flags, build objects, run.
#include <cstdio>
int main() { std::puts("harrier " HARRIER_VERSION); return 0; }
