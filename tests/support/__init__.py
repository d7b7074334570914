"""Test helpers that are neither fixtures nor tests: servers and fakes the tests run against."""
