// crosses: a relative path into zip, and a header torch does not have
#include "../zip/directory.h"
#include "directory.h"
