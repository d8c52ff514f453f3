#include "errors.h"

G_DEFINE_QUARK (microvmd-error-quark, mv_error)
