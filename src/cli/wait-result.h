/* The result of Machine.Wait (introspection/org.microvmd1.Machine.xml), an
 * a{sv} read into MvProperty entries: how microvmctl prints it and which
 * exit status it makes. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

/* "state=Stopped exit_code=3": the entries in the daemon's order; a value
 * that is empty or holds anything but letters, digits and "_.,:/@+-" is
 * quoted as the shell would read it. */
char *mv_wait_result_format_text (GPtrArray *result);

/* A JSON object of the entries under their own keys. */
JsonNode *mv_wait_result_to_json (GPtrArray *result);

/* For "stopped": the exit code the guest reported, if it is one from 0 to
 * 255; else 1 when the machine Failed or the result carries an error, 0
 * otherwise. For "healthy": 0 when the health is "healthy", else 1. */
int mv_wait_result_exit_status (const char *condition, GPtrArray *result);
