/* A plain text table whose columns are as wide as their widest cell. */
#include "table.h"

#include <stdarg.h>
#include <string.h>

#define MV_TABLE_GAP 2

struct _MvTable {
  guint n_columns;
  GPtrArray *cells;        /* row-major, headers first; owned strings */
  gboolean *align_right;   /* one per column */
};

MvTable *
mv_table_new (const char *first_header, ...)
{
  MvTable *table = g_new0 (MvTable, 1);
  va_list ap;

  table->cells = g_ptr_array_new_with_free_func (g_free);
  va_start (ap, first_header);
  for (const char *h = first_header; h != NULL; h = va_arg (ap, const char *))
    g_ptr_array_add (table->cells, g_strdup (h));
  va_end (ap);

  table->n_columns = table->cells->len;
  table->align_right = g_new0 (gboolean, MAX (table->n_columns, 1));
  return table;
}

void
mv_table_free (MvTable *table)
{
  if (table == NULL)
    return;
  g_ptr_array_unref (table->cells);
  g_free (table->align_right);
  g_free (table);
}

void
mv_table_set_align_right (MvTable *table, guint column)
{
  g_return_if_fail (column < table->n_columns);
  table->align_right[column] = TRUE;
}

void
mv_table_add_row (MvTable *table, ...)
{
  va_list ap;

  va_start (ap, table);
  for (guint i = 0; i < table->n_columns; i++)
    {
      const char *cell = va_arg (ap, const char *);
      g_ptr_array_add (table->cells, g_strdup (cell != NULL ? cell : "-"));
    }
  va_end (ap);
}

/* Width on a terminal; cells come from the bus, which guarantees UTF-8. */
static gsize
cell_width (const char *cell)
{
  if (g_utf8_validate (cell, -1, NULL))
    return g_utf8_strlen (cell, -1);
  return strlen (cell);
}

void
mv_table_print (MvTable *table, FILE *out)
{
  g_autofree gsize *widths = g_new0 (gsize, MAX (table->n_columns, 1));
  guint n_rows;

  if (table->n_columns == 0)
    return;
  n_rows = table->cells->len / table->n_columns;

  for (guint i = 0; i < table->cells->len; i++)
    {
      guint col = i % table->n_columns;
      widths[col] = MAX (widths[col], cell_width (g_ptr_array_index (table->cells, i)));
    }

  for (guint row = 0; row < n_rows; row++)
    {
      for (guint col = 0; col < table->n_columns; col++)
        {
          const char *cell = g_ptr_array_index (table->cells, row * table->n_columns + col);
          gsize pad = widths[col] - cell_width (cell);
          gboolean last = col + 1 == table->n_columns;

          if (col > 0)
            fprintf (out, "%*s", MV_TABLE_GAP, "");
          if (table->align_right[col])
            fprintf (out, "%*s%s", (int) pad, "", cell);
          else if (last)
            fputs (cell, out);   /* no trailing blanks */
          else
            fprintf (out, "%s%*s", cell, (int) pad, "");
        }
      fputc ('\n', out);
    }
}
