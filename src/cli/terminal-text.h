/* Text from a guest made safe to print on the operator's terminal. */
#pragma once

#include <glib.h>

/* A copy of @text (@length bytes, or up to its NUL if -1) that cannot move
 * the cursor or change the terminal: a CR LF pair becomes LF, a lone CR is
 * dropped, and every other control character but TAB and LF is shown in
 * caret notation (ESC as "^[", DEL as "^?"). Other bytes are kept. */
char *mv_terminal_text (const char *text, gssize length);
