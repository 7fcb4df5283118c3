// remap_module.cpp - placeholder translation unit.
