/* A real shared library that is not a plugin. */
__attribute__((visibility("default"))) int add(int a, int b) { return a + b; }
