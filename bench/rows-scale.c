#include "bench.h"
void
bench_rows_scale (Bench *bench)
{
}
