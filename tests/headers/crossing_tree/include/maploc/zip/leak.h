// crosses: a public header includes an internal one
#pragma once
#include "zip/deferred.h"
