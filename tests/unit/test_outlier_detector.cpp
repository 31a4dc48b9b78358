#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "llmc/train/outlier_detector.h"

TEST_CASE("outlier detector: no judgement before 10 values or without spread") {
  llmc::OutlierDetector d;
  for (int i = 0; i < 9; ++i) d.push(1.0f + 0.1f * float(i % 2));
  CHECK(d.z_score(1000.0f) == 0.0);
  CHECK_FALSE(d.is_outlier(1000.0f, 3.0));
  llmc::OutlierDetector constant;
  for (int i = 0; i < 20; ++i) constant.push(2.0f);
  CHECK(constant.z_score(5.0f) == 0.0);
}

TEST_CASE("outlier detector: z-score against the population mean and std of the window") {
  llmc::OutlierDetector d;
  // 5 x 1 and 5 x 3: mean 2, population std 1.
  for (int i = 0; i < 10; ++i) d.push(i % 2 == 0 ? 1.0f : 3.0f);
  CHECK(d.z_score(2.0f) == doctest::Approx(0.0));
  CHECK(d.z_score(5.5f) == doctest::Approx(3.5));
  CHECK(d.z_score(0.0f) == doctest::Approx(-2.0));
  CHECK(d.is_outlier(5.5f, 3.0));
  CHECK_FALSE(d.is_outlier(5.5f, 4.0));
  CHECK_FALSE(d.is_outlier(-100.0f, 3.0));  // one-sided: low values are fine
  CHECK_FALSE(d.is_outlier(5.5f, 0.0));     // 0 = off
}

TEST_CASE("outlier detector: the window keeps the last 100 values and restores exactly") {
  llmc::OutlierDetector d;
  for (int i = 0; i < 150; ++i) d.push(float(i));
  const std::vector<float> values = d.values();
  REQUIRE(values.size() == 100);
  CHECK(values.front() == 50.0f);
  CHECK(values.back() == 149.0f);
  llmc::OutlierDetector r;
  r.restore(values);
  CHECK(r.values() == values);
  CHECK(r.z_score(300.0f) == d.z_score(300.0f));
  CHECK_THROWS_AS(r.restore(std::vector<float>(101, 1.0f)), std::invalid_argument);
}
