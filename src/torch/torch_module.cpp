// torch_module.cpp - placeholder translation unit.
