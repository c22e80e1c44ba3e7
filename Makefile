# The two commands a newcomer runs: `make demo` and `make test`.
SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:$(PATH)
CARGO ?= cargo

.PHONY: demo test bench build deps fmt clippy

build:
	$(CARGO) build --release

demo:
	scripts/install-deps.sh demo
	$(CARGO) build --release
	scripts/demo.sh

test:
	scripts/install-deps.sh test
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets -- -D warnings
	$(CARGO) test

bench:
	scripts/install-deps.sh bench
	$(CARGO) build --release
	bench/vs-peers
	bench/watch-overhead
