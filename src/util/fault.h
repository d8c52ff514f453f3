/* Fault points for crash-safety tests: with MICROVMD_FAULT_POINT=NAME in
 * its environment, the daemon aborts when it reaches the point NAME, as a
 * power cut would stop it there. Unset, every point is a no-op. */
#pragma once
#include <glib.h>

/* Aborts if @phase ":" @when is the configured fault point. */
void mv_fault_point (const char *phase, const char *when);

/* I/O failures for tests of a full or failing disk: with
 * MICROVMD_FAULT_IO_FILE=PATH in the environment, the record write that
 * reaches step @step ("create", "write", "fsync", "rename", "dirsync")
 * while PATH names that step fails there with EIO, once: PATH is removed.
 * While PATH says "hold:" and the step, every write that reaches the step
 * waits there, as on a slow disk, until PATH says something else or is
 * gone. Returns the errno to fail with, or 0. Unset, always 0. */
int  mv_fault_io (const char *step);
