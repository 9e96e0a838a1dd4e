"""Rust crates and workspaces (issue #18): evidence, toolchain choice, the Dockerfile, the
libtest result parser and the diagnose rules of the Rust failure classes."""
