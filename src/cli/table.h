/* A plain text table whose columns are as wide as their widest cell. */
#pragma once

#include <stdio.h>
#include <glib.h>

typedef struct _MvTable MvTable;

/* The headers name the columns; the list ends with NULL. */
MvTable *mv_table_new (const char *first_header, ...) G_GNUC_NULL_TERMINATED;
void mv_table_free (MvTable *table);

/* Right-aligns a column, for numbers. */
void mv_table_set_align_right (MvTable *table, guint column);

/* Adds a row of exactly as many cells as the table has columns; a NULL cell
 * prints as "-". */
void mv_table_add_row (MvTable *table, ...);

void mv_table_print (MvTable *table, FILE *out);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvTable, mv_table_free)
