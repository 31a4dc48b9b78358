# Included by the top Makefile and dev/cuda/Makefile: every compile (g++ and nvcc, not the links) runs
# under ccache when there is one (`make setup` installs it); CCACHE= compiles without. A compile of
# a source, headers and flags that ccache has seen before takes its object (and the compiler's
# messages) from the cache in ~/.cache/ccache. BASEDIR: paths inside the checkout count relative to
# it, so a clone in another folder hits what this one compiled; NOHASHDIR: nor does the folder the
# -g builds record for the debugger. The cache is never needed: without it, everything is compiled.
# Exported for dev/bench/vs_llmc.sh, whose build of llm.c (under make gpu-dist) uses it too.
CCACHE ?= $(shell command -v ccache 2>/dev/null)
export CCACHE
ifneq ($(CCACHE),)
export CCACHE_BASEDIR ?= $(abspath $(dir $(lastword $(MAKEFILE_LIST)))..)
export CCACHE_NOHASHDIR ?= 1
endif
