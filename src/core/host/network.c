#include "network.h"

void
mv_network_attachment_free (MvNetworkAttachment *attachment)
{
  if (!attachment)
    return;
  g_free (attachment->network_id);
  g_free (attachment->tap_device);
  g_free (attachment->mac_address);
  g_free (attachment->address);
  g_free (attachment->gateway);
  g_free (attachment);
}
