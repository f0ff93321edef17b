//! Benchmarks and retrieval-quality harness (see the binaries in src/bin).
