/* Fault points for crash-safety tests: with MICROVMD_FAULT_POINT=NAME in
 * its environment, the daemon aborts when it reaches the point NAME, as a
 * power cut would stop it there. Unset, every point is a no-op. */
#pragma once
#include <glib.h>

/* Aborts if @phase ":" @when is the configured fault point. */
void mv_fault_point (const char *phase, const char *when);
