# Every third-party dependency comes from Debian packages (deploy/install-deps.sh).
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(MPI REQUIRED COMPONENTS CXX)
find_package(cppzmq REQUIRED)
find_package(CapnProto 0.9 REQUIRED QUIET)
find_package(yaml-cpp REQUIRED)
if(NOT TARGET yaml-cpp::yaml-cpp)
  add_library(yaml-cpp::yaml-cpp ALIAS yaml-cpp)
endif()
find_package(nlohmann_json 3.11 REQUIRED)
find_package(prometheus-cpp CONFIG REQUIRED)
find_package(GTest REQUIRED)
if(BMAD_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
# Debian's cpp-httplib is a compiled library with no CMake config; its .pc Cflags
# (OpenSSL/zlib/brotli switches) change class layouts and must be used.
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
# zlib (libcpp-httplib-dev brings it): tests send compressed request bodies.
find_package(ZLIB REQUIRED)
set(BLA_VENDOR OpenBLAS)
find_package(BLAS REQUIRED)
find_path(CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas-pthread REQUIRED)
