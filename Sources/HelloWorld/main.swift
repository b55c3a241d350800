// The baseline for the cold-start benchmarks: the smallest Swift executable.
print("Hello, world!")
