#pragma once
#include "core/runtime.h"

MvRuntime *mv_test_runtime_new (void);
