# maploc_python.cmake - `pip install .` (pyproject.toml, scikit-build-core): libmaploc.so into the
# Python package, beside python/maploc's __init__.py, where maploc/_capi.py looks first
# (docs/python.md). One file, named libmaploc.so: a wheel cannot hold the usual symlinks.
# Component python only: the wheel carries no headers, static libraries, CMake or pkg-config files.
if(NOT TARGET maploc_shared)
  message(FATAL_ERROR "MAPLOC_PYTHON_WHEEL needs libmaploc.so, made with MAPLOC_INSTALL=ON")
endif()
install(FILES $<TARGET_FILE:maploc_shared> DESTINATION maploc RENAME libmaploc.so COMPONENT python)
