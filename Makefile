# The two commands a newcomer needs: `make demo` and `make test`.
.PHONY: demo test build bench deps
demo:
	scripts/deps.sh
	scripts/embed-spec.sh
	scripts/embed-redact-rules.py
	scripts/embed-web.sh
	swift run -c release codingbridge demo

test:
	scripts/test.sh

build:
	scripts/deps.sh
	scripts/embed-spec.sh
	scripts/embed-redact-rules.py
	scripts/embed-web.sh
	swift build -c release

bench: build
	swift run -c release cb-bench all
