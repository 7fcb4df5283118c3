// crosses: zip may not use torch
#include "maploc/torch/checkpoint.h"
