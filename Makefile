# sandboxctl — the two commands that matter:
#
#   make run    set everything up (docker.io, dockerd, images, bin/) and run
#               the main job: a command in a fresh sandbox, then background + poll
#   make test   the same prerequisites, then every test (unit + integration/)
#   make unit   the tests that need no Docker Engine, for the edit-test loop
#
# Other targets: docker-up docker-down images build lint test-k8s k8s-build k8s-up k8s-down clean
# clean-images help.
# `make images FORCE=1` rebuilds images that already exist.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO          ?= go
BIN         := bin/sandboxctl
STATE       ?= $(CURDIR)/.state/demo
FORCE       ?=
# Test artifacts (the web console's browser screenshots) are kept under $(TEST_OUTPUT)/_artifacts.
TEST_OUTPUT ?= $(CURDIR)/test-output
TEST_FLAGS  ?= -race -timeout 25m -artifacts -outputdir $(TEST_OUTPUT)
PKGS        ?= ./...

# The testcontainers reaper image (Ryuk) cannot be pulled here: no Docker Hub.
export TESTCONTAINERS_RYUK_DISABLED := true

IMAGES_FLAGS := $(if $(filter 1 yes true,$(FORCE)),--force,)

.PHONY: help docker-up docker-down images build run test test-go test-k8s k8s-build k8s-up k8s-down unit lint toolchain clean clean-images

help:
	@sed -n '1,9p' Makefile | sed 's/^# \{0,1\}//'

## Docker Engine: installs docker.io and starts dockerd if no daemon answers.
docker-up:
	@scripts/docker-up.sh

## Stops the dockerd that docker-up started (never one it did not start).
docker-down:
	@scripts/docker-down.sh

## sandboxctl/sandbox:bookworm and sandboxctl/testbb:1, built without any registry,
## and sandboxctl/sandboxctld:dev (the daemon, for the testcontainers module).
images: docker-up
	@images/build.sh $(IMAGES_FLAGS) all
	@images/build.sh $(IMAGES_FLAGS) daemon

## Go toolchain check (and a C compiler for -race).
toolchain:
	@scripts/toolchain.sh

## The three binaries, built as internal/testbuild builds them for the tests
## (static, -trimpath, stripped), so the tested binary is the shipped one.
## They are linked into bin/.link and installed (copied) into bin/: the
## linker writes through a memory mapping, which leaves a file in the page
## cache in small pages, and a run of `sandboxctl exec` from it takes
## 0.4-0.9 ms more in page faults than from an installed copy.
build: toolchain
	@mkdir -p bin/.link
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o bin/.link/ ./cmd/sandboxctl ./cmd/sandboxctld ./cmd/sandboxctl-supervisor
	@install -m 0755 bin/.link/sandboxctl bin/.link/sandboxctld bin/.link/sandboxctl-supervisor bin/

run: docker-up images build
	@STATE="$(STATE)" SANDBOXCTL_BIN=./$(BIN) scripts/demo.sh

## Every test: the Go packages and, beside them (in parallel), the Kubernetes engine's tests
## against a real single-node cluster (test-k8s). The cluster's output goes to
## $(TEST_OUTPUT)/k8s.log and is printed at the end.
test: toolchain docker-up images
	@mkdir -p $(TEST_OUTPUT)
	@scripts/k8s/test.sh >$(TEST_OUTPUT)/k8s.log 2>&1 & k8s=$$!; \
	rc=0; $(GO) test $(TEST_FLAGS) $(PKGS) || rc=$$?; \
	krc=0; wait $$k8s || krc=$$?; \
	echo "---- test-k8s (scripts/k8s/test.sh, exit status $$krc) ----"; cat $(TEST_OUTPUT)/k8s.log; \
	[ $$rc = 0 ] && [ $$krc = 0 ]

## The Go packages only (no Kubernetes cluster).
test-go: toolchain docker-up images
	@mkdir -p $(TEST_OUTPUT)
	$(GO) test $(TEST_FLAGS) $(PKGS)

## The Kubernetes engine (sandbox/kube) against a single-node cluster that scripts/k8s builds
## (from the Go module proxy; cached), starts, and takes down again at the end.
test-k8s: toolchain docker-up images
	@scripts/k8s/test.sh

## The test cluster by hand: k8s-up prints the kubeconfig path; k8s-down stops it and undoes
## what it changed on the host.
k8s-build: toolchain
	@scripts/k8s/build.sh
k8s-up: k8s-build
	@K8S_BIN=$$(scripts/k8s/build.sh | tail -n 1) K8S_IMPORT_DOCKER="sandboxctl/testbb:1 sandboxctl/sandboxctld:dev" scripts/k8s/up.sh
k8s-down:
	@scripts/k8s/down.sh

## Every test that needs no Docker Engine: no set-up, no race detector. DOCKER_HOST
## names no socket and SANDBOXCTL_SKIP_DOCKER=1 turns the Docker tests into skips.
unit:
	DOCKER_HOST=unix:///nonexistent/docker.sock SANDBOXCTL_SKIP_DOCKER=1 CI= $(GO) test $(PKGS)

## go mod tidy -diff, gofmt, go vet, staticcheck, govulncheck (tools pinned in go.mod).
lint: toolchain
	@scripts/lint.sh

clean:
	rm -rf bin .state

## Removes the images (the next `make images` builds them again).
clean-images:
	-docker image rm sandboxctl/sandbox:bookworm sandboxctl/testbb:1 sandboxctl/sandboxctld:dev
