#include <doctest/doctest.h>

#include <string>

#include "llmc/io/json.h"

using namespace llmc::json;

TEST_CASE("json: objects, arrays, numbers and literals") {
  Value v = parse(R"( {"a": [1, -2.5e1, true, false, null], "b": {"c": "d"}} )");
  REQUIRE(v.kind == Value::Kind::Object);
  const Value* a = v.find("a");
  REQUIRE(a != nullptr);
  REQUIRE(a->array.size() == 5);
  CHECK(a->array[1].number == -25.0);
  CHECK(a->array[2].boolean);
  CHECK(a->array[4].kind == Value::Kind::Null);
  CHECK(v.find("b")->find("c")->string == "d");
  CHECK(v.find("missing") == nullptr);
}

TEST_CASE("json: string escapes decode to UTF-8") {
  CHECK(parse(R"("a\"b\\c\/d\n\t")").string == "a\"b\\c/d\n\t");
  CHECK(parse(R"("\u00e9\u4e2d")").string == "\xC3\xA9\xE4\xB8\xAD");
  // U+1F600 as a surrogate pair
  CHECK(parse(R"("\ud83d\ude00")").string == "\xF0\x9F\x98\x80");
  CHECK(parse("\"raw \xE2\x82\xAC\"").string == "raw \xE2\x82\xAC");
}

TEST_CASE("json: malformed input names the offset") {
  CHECK_THROWS_AS(parse("[1, 2"), JsonError);
  CHECK_THROWS_AS(parse(R"("\ud83d")"), JsonError);
  CHECK_THROWS_AS(parse(R"("\x")"), JsonError);
  CHECK_THROWS_AS(parse("{\"a\" 1}"), JsonError);
  CHECK_THROWS_AS(parse("[1] x"), JsonError);
  try {
    parse("[1, ?]");
    FAIL("expected an error");
  } catch (const JsonError& e) {
    CHECK(e.offset == 4);
    CHECK(e.reason == "unexpected character '?'");
    CHECK(std::string(e.what()) == "JSON error at byte 4: unexpected character '?'");
  }
}
