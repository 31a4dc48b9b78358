# gpt2 trainer: see README.md. Host code (llmc/*.cpp) is built once into build/libllmc.a and
# shared by the tools, both trainers and the unit tests.
CXX      ?= g++
CXXFLAGS ?= -O3 -march=native
CXXFLAGS += -std=c++17 -Wall -Wextra -fopenmp -I. -MMD -MP
LDLIBS   += -lfmt -lpthread

BUILD     := build
LLMC_SRCS := $(wildcard llmc/*.cpp)
LLMC_OBJS := $(LLMC_SRCS:%.cpp=$(BUILD)/%.o)
UNIT_SRCS := $(wildcard tests/unit/*.cpp)
UNIT_OBJS := $(UNIT_SRCS:%.cpp=$(BUILD)/%.o)
LIBLLMC   := $(BUILD)/libllmc.a

.PHONY: all setup data run test bench-tokenize clean
all: tokenize train_gpt2 test_gpt2 hf_convert

setup:
	@bash scripts/setup.sh

$(BUILD)/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -c $< -o $@

$(LIBLLMC): $(LLMC_OBJS)
	@rm -f $@
	ar rcs $@ $^

tokenize: $(BUILD)/tokenize.o $(LIBLLMC)
	$(CXX) $(CXXFLAGS) $^ -o $@ $(LDLIBS)

train_gpt2: $(BUILD)/train_gpt2.o $(LIBLLMC)
	$(CXX) $(CXXFLAGS) $^ -o $@ $(LDLIBS)

test_gpt2: $(BUILD)/test_gpt2.o $(LIBLLMC)
	$(CXX) $(CXXFLAGS) $^ -o $@ $(LDLIBS)

hf_convert: $(BUILD)/hf_convert.o $(LIBLLMC)
	$(CXX) $(CXXFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/unit_tests: $(UNIT_OBJS) $(LIBLLMC)
	$(CXX) $(CXXFLAGS) $^ -o $@ $(LDLIBS)

# Targets that need installed packages run `setup` first, then build in a sub-make, so that a
# parallel build on a fresh machine never compiles before the headers and libraries are there.
data: setup
	@$(MAKE) --no-print-directory tokenize
	@bash scripts/prepare_corpus.sh

run: data
	@$(MAKE) --no-print-directory train_gpt2
	@bash scripts/run.sh

test: setup
	@$(MAKE) --no-print-directory tokenize train_gpt2 test_gpt2 hf_convert $(BUILD)/unit_tests
	@bash tests/run_all.sh

bench-tokenize: setup
	@$(MAKE) --no-print-directory tokenize
	@bash scripts/bench_tokenize.sh

clean:
	rm -rf $(BUILD) tokenize train_gpt2 test_gpt2 hf_convert

-include $(LLMC_OBJS:.o=.d) $(UNIT_OBJS:.o=.d) $(BUILD)/tokenize.d $(BUILD)/train_gpt2.d $(BUILD)/test_gpt2.d $(BUILD)/hf_convert.d
