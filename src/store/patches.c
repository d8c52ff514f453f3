#include "patches.h"
