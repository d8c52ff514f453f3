#pragma once
#include "core/host/runtime.h"

MvRuntime *mv_test_runtime_new (void);
