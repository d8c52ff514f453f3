/* Writing the Prometheus text exposition format, version 0.0.4: metric
 * families with their HELP and TYPE lines, and samples with labels whose
 * values are escaped as the format asks. Pure. */
#pragma once
#include <glib.h>

#define MV_PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* "# HELP @name @help" and "# TYPE @name @type" (@type: counter, gauge,
 * histogram, ...); @help is escaped (backslash, newline). */
void mv_prom_family (GString *out, const char *name, const char *type, const char *help);
/* Appends @value as a label value: backslash, double quote and newline
 * escaped. */
void mv_prom_escape_label (GString *out, const char *value);
/* "@name{k="v",...} @value": @labels is pairs of name and value, NULL
 * ended (may be NULL for none). Label names are the caller's constants. */
void mv_prom_sample_u64 (GString *out, const char *name, const char *const *labels,
                         guint64 value);
void mv_prom_sample_double (GString *out, const char *name, const char *const *labels,
                            double value);
/* A bucket bound, or any value, as the format spells it: "+Inf", "0.25", "1". */
void mv_prom_append_double (GString *out, double value);
