/* What the test VMMs share besides HTTP, JSON, vsock and the guest: the
 * main loop and its exit, a line logger, errno text as Rust prints it, and
 * the option strings of the two command lines. Test code only. */
#pragma once
#include <glib.h>

/* The version to report: $MICROVMD_FAKE_VERSION, else what the name the
 * binary was run by ends in after its last '-' if that is a version
 * ("cloud-hypervisor-40.0.0", a link to the test VMM), else @fallback. */
const char *fake_vmm_version (const char *argv0, const char *fallback);

/* Runs the main loop until fake_vmm_exit(); returns the exit code. */
int   fake_vmm_run (void);
/* Ends the process with @code once the current callback returns, as a
 * VMM's own exit does, from wherever it is called. */
void  fake_vmm_exit (int code);

/* Rust's io::Error Display: "No such file or directory (os error 2)". */
char *fake_os_error_text (int errnum);

typedef char *(*FakeLogPrefix) (const char *level, gpointer data);

typedef struct {
  FakeLogPrefix prefix;
  gpointer      data;
  int           level;
  int           fd;          /* -1: stderr */
} FakeLog;

void  fake_log_init (FakeLog *log, FakeLogPrefix prefix, gpointer data, const char *level);
void  fake_log_clear (FakeLog *log);
/* Later lines go to @path (appended), or stay where they were if it
 * cannot be opened. */
void  fake_log_set_path (FakeLog *log, const char *path);
/* Unknown level names leave the level as it was. */
void  fake_log_set_level (FakeLog *log, const char *level);
void  fake_log_error (FakeLog *log, const char *format, ...) G_GNUC_PRINTF (2, 3);
void  fake_log_warning (FakeLog *log, const char *format, ...) G_GNUC_PRINTF (2, 3);
void  fake_log_info (FakeLog *log, const char *format, ...) G_GNUC_PRINTF (2, 3);
void  fake_log_debug (FakeLog *log, const char *format, ...) G_GNUC_PRINTF (2, 3);

/* The kernel command line: the last value given for @key wins; a bare
 * word has the value "". NULL when @key is absent. */
char     *fake_cmdline_get (const char *cmdline, const char *key);
gboolean  fake_cmdline_has (const char *cmdline, const char *key);

/* "path=/x,foo=bar" (Cloud Hypervisor's option strings) -> table; a bare
 * word maps to NULL. Brackets keep commas inside a value. */
GHashTable *fake_parse_options (const char *text);

/* The whole file; FALSE with *errnum set if it cannot be read. */
gboolean fake_read_file (const char *path, char **contents, gsize *length, int *errnum);

/* Writes all of @len bytes; FALSE with errno set if it could not. */
gboolean fake_write_all (int fd, const void *data, gsize len);
