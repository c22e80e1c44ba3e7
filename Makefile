# The two commands a newcomer runs: `make demo` and `make test`.
SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:$(PATH)
CARGO ?= cargo

.PHONY: demo test bench build deps fmt clippy install uninstall fuzz-check

PREFIX ?= /usr/local
DESTDIR ?=

build:
	$(CARGO) build --release

demo:
	scripts/install-deps.sh demo
	$(CARGO) build --release
	scripts/demo.sh

# The format check, clippy (the fuzz targets too), one build of the tests, the test
# binaries side by side where their loads allow it and alone where they read a quiet host
# (scripts/test.sh says which and why).
test:
	scripts/install-deps.sh test
	scripts/test.sh

# The fuzz targets build on stable (running them needs nightly and cargo-fuzz, see
# docs/design.md); their checks run on the seeds in `cargo test` (tests/fuzz_seeds.rs).
# They are a member of the workspace: `make test`'s clippy checks them.
fuzz-check:
	$(CARGO) check -p loadlens-fuzz --no-default-features

bench:
	scripts/install-deps.sh bench
	$(CARGO) build --release
	bench/vs-peers
	bench/watch-overhead
	bench/h3-cost

# The binary, the man page and the shell completions (generated from the clap
# definitions into docs/, kept current by tests/docs_current.rs).
install: build
	install -Dm755 target/release/loadlens $(DESTDIR)$(PREFIX)/bin/loadlens
	install -Dm644 docs/loadlens.1 $(DESTDIR)$(PREFIX)/share/man/man1/loadlens.1
	install -Dm644 docs/completions/loadlens.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/loadlens
	install -Dm644 docs/completions/_loadlens $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_loadlens
	install -Dm644 docs/completions/loadlens.fish $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/loadlens.fish

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/loadlens $(DESTDIR)$(PREFIX)/share/man/man1/loadlens.1 \
	  $(DESTDIR)$(PREFIX)/share/bash-completion/completions/loadlens \
	  $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_loadlens \
	  $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/loadlens.fish
