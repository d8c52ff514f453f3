#include "bench.h"
void
bench_row_qemu (Bench *bench)
{
}
