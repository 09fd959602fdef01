// The source the test precompiled header (test_pch.hpp) is built with; see tests/CMakeLists.txt.
