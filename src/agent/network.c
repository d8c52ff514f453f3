/* The guest's interface on its network, as CONFIG's NET says: found by
 * its MAC, given its MTU and address, brought up, with a default route
 * through the gateway and /etc/resolv.conf naming the name servers. Done
 * with the kernel's interface ioctls: no tool of the guest's is needed. */
#include "agent.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <net/route.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define SYS_CLASS_NET      "/sys/class/net"
#define RESOLV_CONF        "/etc/resolv.conf"
/* How long the NIC's driver may take to bring the interface. */
#define NIC_WAIT_MS        10000

/* The interface whose address is @mac, into @name. */
static bool
find_interface (const char *mac, char name[IF_NAMESIZE])
{
  DIR *dir = opendir (SYS_CLASS_NET);
  struct dirent *entry;
  bool found = false;

  if (!dir)
    return false;
  while (!found && (entry = readdir (dir)) != NULL)
    {
      char path[320], address[32] = "";
      int fd;
      ssize_t n;

      if (entry->d_name[0] == '.' || strlen (entry->d_name) >= IF_NAMESIZE)
        continue;
      snprintf (path, sizeof path, SYS_CLASS_NET "/%s/address", entry->d_name);
      fd = open (path, O_RDONLY | O_CLOEXEC);
      if (fd < 0)
        continue;
      n = read (fd, address, sizeof address - 1);
      close (fd);
      if (n <= 0)
        continue;
      address[n] = '\0';
      address[strcspn (address, "\n")] = '\0';
      if (strcasecmp (address, mac) == 0)
        {
          snprintf (name, IF_NAMESIZE, "%s", entry->d_name);
          found = true;
        }
    }
  closedir (dir);
  return found;
}

static bool
parse_address (const char *cidr, struct in_addr *address, struct in_addr *mask)
{
  char text[INET_ADDRSTRLEN + 4];
  char *slash, *end;
  unsigned long prefix = 32;

  snprintf (text, sizeof text, "%s", cidr);
  slash = strchr (text, '/');
  if (slash)
    {
      *slash = '\0';
      errno = 0;
      prefix = strtoul (slash + 1, &end, 10);
      if (errno || *end || prefix > 32)
        return false;
    }
  if (inet_pton (AF_INET, text, address) != 1)
    return false;
  mask->s_addr = htonl (prefix == 0 ? 0 : 0xffffffffu << (32 - prefix));
  return true;
}

static void
set_sockaddr (struct sockaddr *sa, struct in_addr address)
{
  struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr = address };

  memcpy (sa, &sin, sizeof sin);
}

static bool
fail (char *error, size_t size, const char *what, const char *ifname)
{
  snprintf (error, size, "network: %s %s: %s", what, ifname, strerror (errno));
  return false;
}

static bool
write_resolv_conf (const StrList *dns, char *error, size_t size)
{
  char text[1024];
  size_t len = 0;

  len += (size_t) snprintf (text, sizeof text, "# microvmd: the network's name server\n");
  for (size_t i = 0; i < dns->len && len < sizeof text; i++)
    len += (size_t) snprintf (text + len, sizeof text - len, "nameserver %s\n", dns->items[i]);
  if (len >= sizeof text)
    {
      snprintf (error, size, "network: too many name servers");
      return false;
    }
  /* A link (to a resolver's file) is replaced by the file itself. */
  unlink (RESOLV_CONF);
  mkdir_parents (RESOLV_CONF, 0755);
  if (!write_file_atomic (RESOLV_CONF, text, len, 0644))
    {
      snprintf (error, size, "network: could not write " RESOLV_CONF ": %s", strerror (errno));
      return false;
    }
  return true;
}

bool
network_apply (const NetConfig *net, char *error, size_t size)
{
  char ifname[IF_NAMESIZE] = "";
  struct in_addr address, mask, gateway;
  struct ifreq ifr = { 0 };
  int64_t deadline = now_ms () + NIC_WAIT_MS;
  int fd;

  if (!parse_address (net->address, &address, &mask))
    {
      snprintf (error, size, "network: ADDRESS %s is not an IPv4 address with a prefix",
                net->address);
      return false;
    }
  if (net->gateway && inet_pton (AF_INET, net->gateway, &gateway) != 1)
    {
      snprintf (error, size, "network: GATEWAY %s is not an IPv4 address", net->gateway);
      return false;
    }
  while (!find_interface (net->mac, ifname))
    {
      if (now_ms () >= deadline)
        {
          snprintf (error, size, "network: no interface with MAC %s", net->mac);
          return false;
        }
      usleep (50 * 1000);
    }

  fd = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return fail (error, size, "socket for", ifname);
  memcpy (ifr.ifr_name, ifname, strlen (ifname));
  if (net->mtu)
    {
      ifr.ifr_mtu = (int) net->mtu;
      if (ioctl (fd, SIOCSIFMTU, &ifr) < 0)
        goto failed_mtu;
    }
  set_sockaddr (&ifr.ifr_addr, address);
  if (ioctl (fd, SIOCSIFADDR, &ifr) < 0)
    goto failed_address;
  set_sockaddr (&ifr.ifr_netmask, mask);
  if (ioctl (fd, SIOCSIFNETMASK, &ifr) < 0)
    goto failed_address;
  if (ioctl (fd, SIOCGIFFLAGS, &ifr) < 0)
    goto failed_up;
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (ioctl (fd, SIOCSIFFLAGS, &ifr) < 0)
    goto failed_up;
  if (net->gateway)
    {
      struct rtentry route = { 0 };
      struct in_addr any = { 0 };

      set_sockaddr (&route.rt_dst, any);
      set_sockaddr (&route.rt_genmask, any);
      set_sockaddr (&route.rt_gateway, gateway);
      route.rt_flags = RTF_UP | RTF_GATEWAY;
      route.rt_dev = ifname;
      if (ioctl (fd, SIOCADDRT, &route) < 0 && errno != EEXIST)
        goto failed_route;
    }
  close (fd);
  agent_log ("network: %s is %s%s%s", ifname, net->address, net->gateway ? " via " : "",
             net->gateway ? net->gateway : "");
  return net->dns.len == 0 || write_resolv_conf (&net->dns, error, size);

failed_mtu:
  fail (error, size, "could not set the MTU of", ifname);
  close (fd);
  return false;
failed_address:
  fail (error, size, "could not set the address of", ifname);
  close (fd);
  return false;
failed_up:
  fail (error, size, "could not bring up", ifname);
  close (fd);
  return false;
failed_route:
  fail (error, size, "could not add the default route through", ifname);
  close (fd);
  return false;
}

/* ---- a restored guest's new settings ---- */

#define PROC_NET_ROUTE     "/proc/net/route"
/* Default routes deleted at most, before the new one is added. */
#define ROUTES_MAX         16

static bool
parse_mac (const char *text, unsigned char mac[6])
{
  unsigned int b[6];
  char end;

  if (sscanf (text, "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5],
              &end) != 6)
    return false;
  for (int i = 0; i < 6; i++)
    mac[i] = (unsigned char) b[i];
  return true;
}

/* The guest's one interface with a device behind it, when it has one. */
static bool
find_only_interface (char name[IF_NAMESIZE])
{
  DIR *dir = opendir (SYS_CLASS_NET);
  struct dirent *entry;
  int found = 0;

  if (!dir)
    return false;
  while ((entry = readdir (dir)) != NULL)
    {
      char path[320];

      if (entry->d_name[0] == '.' || strlen (entry->d_name) >= IF_NAMESIZE)
        continue;
      snprintf (path, sizeof path, SYS_CLASS_NET "/%s/device", entry->d_name);
      if (access (path, F_OK) != 0)
        continue;
      if (found++ == 0)
        snprintf (name, IF_NAMESIZE, "%s", entry->d_name);
    }
  closedir (dir);
  return found == 1;
}

/* The default route's gateway through @ifname, or 0.0.0.0 for none. */
static struct in_addr
default_gateway (const char *ifname)
{
  struct in_addr gateway = { 0 };
  char line[256];
  FILE *f = fopen (PROC_NET_ROUTE, "re");

  if (!f)
    return gateway;
  while (fgets (line, sizeof line, f))
    {
      char iface[IF_NAMESIZE + 1];
      unsigned int dst, gw, flags, mask;

      /* Iface Destination Gateway Flags RefCnt Use Metric Mask ...; the
       * addresses as the kernel holds them, in hex. */
      if (sscanf (line, "%16s %x %x %x %*d %*d %*d %x", iface, &dst, &gw, &flags, &mask) != 5)
        continue;
      if (strcmp (iface, ifname) == 0 && dst == 0 && mask == 0 && (flags & RTF_GATEWAY))
        {
          gateway.s_addr = gw;
          break;
        }
    }
  fclose (f);
  return gateway;
}

static bool
file_holds (const char *path, const char *text, size_t len)
{
  char have[1024];
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  ssize_t n;

  if (fd < 0)
    return false;
  n = read (fd, have, sizeof have);
  close (fd);
  return n >= 0 && (size_t) n == len && memcmp (have, text, len) == 0;
}

static bool
update_resolv_conf (const StrList *dns, unsigned *changed, char *error, size_t size)
{
  char text[1024];
  size_t len = (size_t) snprintf (text, sizeof text, "# microvmd: the network's name server\n");

  for (size_t i = 0; i < dns->len && len < sizeof text; i++)
    len += (size_t) snprintf (text + len, sizeof text - len, "nameserver %s\n", dns->items[i]);
  if (len < sizeof text && file_holds (RESOLV_CONF, text, len))
    return true;
  if (!write_resolv_conf (dns, error, size))
    return false;
  *changed |= CHANGED_DNS;
  return true;
}

static bool
set_flags (int fd, const char *ifname, short on, short off)
{
  struct ifreq ifr = { 0 };

  memcpy (ifr.ifr_name, ifname, strlen (ifname));
  if (ioctl (fd, SIOCGIFFLAGS, &ifr) < 0)
    return false;
  ifr.ifr_flags = (short) ((ifr.ifr_flags | on) & ~off);
  return ioctl (fd, SIOCSIFFLAGS, &ifr) == 0;
}

/* A NIC that cannot change its MAC while up is taken down for it. */
static bool
set_mac (int fd, const char *ifname, const unsigned char mac[6])
{
  struct ifreq ifr = { 0 };

  memcpy (ifr.ifr_name, ifname, strlen (ifname));
  ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
  memcpy (ifr.ifr_hwaddr.sa_data, mac, 6);
  if (ioctl (fd, SIOCSIFHWADDR, &ifr) == 0)
    return true;
  if (errno != EBUSY)
    return false;
  if (!set_flags (fd, ifname, 0, IFF_UP))
    return false;
  if (ioctl (fd, SIOCSIFHWADDR, &ifr) < 0)
    {
      int saved = errno;

      set_flags (fd, ifname, IFF_UP, 0);
      errno = saved;
      return false;
    }
  return set_flags (fd, ifname, IFF_UP, 0);
}

static bool
replace_default_route (int fd, const char *ifname, const struct in_addr *gateway)
{
  struct in_addr any = { 0 };

  /* A default route named without its gateway is any of them. */
  for (int i = 0; i < ROUTES_MAX; i++)
    {
      struct rtentry route = { 0 };

      set_sockaddr (&route.rt_dst, any);
      set_sockaddr (&route.rt_genmask, any);
      route.rt_dev = (char *) ifname;
      if (ioctl (fd, SIOCDELRT, &route) < 0)
        break;
    }
  if (gateway)
    {
      struct rtentry route = { 0 };

      set_sockaddr (&route.rt_dst, any);
      set_sockaddr (&route.rt_genmask, any);
      set_sockaddr (&route.rt_gateway, *gateway);
      route.rt_flags = RTF_UP | RTF_GATEWAY;
      route.rt_dev = (char *) ifname;
      if (ioctl (fd, SIOCADDRT, &route) < 0 && errno != EEXIST)
        return false;
    }
  return true;
}

bool
network_reidentify (const NetConfig *want, const NetConfig *had, unsigned *changed,
                    char *error, size_t size)
{
  char ifname[IF_NAMESIZE] = "";
  unsigned char mac[6];
  struct in_addr address, mask, gateway = { 0 }, gateway_before;
  struct ifreq ifr = { 0 };
  bool ok = true;
  int fd;

  if (!parse_mac (want->mac, mac))
    {
      snprintf (error, size, "network: MAC %s is not a MAC address", want->mac);
      return false;
    }
  if (!parse_address (want->address, &address, &mask))
    {
      snprintf (error, size, "network: ADDRESS %s is not an IPv4 address with a prefix",
                want->address);
      return false;
    }
  if (want->gateway && inet_pton (AF_INET, want->gateway, &gateway) != 1)
    {
      snprintf (error, size, "network: GATEWAY %s is not an IPv4 address", want->gateway);
      return false;
    }
  if (agent.mode == MODE_TEST)
    return true;   /* the test mode has no interface of its own */
  /* A restored guest's NIC has the MAC it was frozen with. */
  if (!find_interface (want->mac, ifname) && !(had->mac && find_interface (had->mac, ifname)) &&
      !find_only_interface (ifname))
    {
      snprintf (error, size, "network: no interface with MAC %s%s%s, nor only one interface",
                had->mac ? had->mac : want->mac, had->mac ? " or " : "", had->mac ? want->mac : "");
      return false;
    }
  fd = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return fail (error, size, "socket for", ifname);
  gateway_before = default_gateway (ifname);
  memcpy (ifr.ifr_name, ifname, strlen (ifname));

  if (ioctl (fd, SIOCGIFHWADDR, &ifr) < 0 || memcmp (ifr.ifr_hwaddr.sa_data, mac, 6) != 0)
    {
      if (!set_mac (fd, ifname, mac))
        ok = fail (error, size, "could not set the MAC of", ifname);
      else
        *changed |= CHANGED_MAC;
    }
  if (ok && want->mtu && (ioctl (fd, SIOCGIFMTU, &ifr) < 0 || ifr.ifr_mtu != (int) want->mtu))
    {
      ifr.ifr_mtu = (int) want->mtu;
      if (ioctl (fd, SIOCSIFMTU, &ifr) < 0)
        ok = fail (error, size, "could not set the MTU of", ifname);
      else
        *changed |= CHANGED_MTU;
    }
  if (ok)
    {
      struct sockaddr_in have_address = { 0 }, have_mask = { 0 };

      if (ioctl (fd, SIOCGIFADDR, &ifr) == 0)
        memcpy (&have_address, &ifr.ifr_addr, sizeof have_address);
      if (ioctl (fd, SIOCGIFNETMASK, &ifr) == 0)
        memcpy (&have_mask, &ifr.ifr_netmask, sizeof have_mask);
      if (have_address.sin_addr.s_addr != address.s_addr ||
          have_mask.sin_addr.s_addr != mask.s_addr)
        {
          set_sockaddr (&ifr.ifr_addr, address);
          if (ioctl (fd, SIOCSIFADDR, &ifr) < 0)
            ok = fail (error, size, "could not set the address of", ifname);
          set_sockaddr (&ifr.ifr_netmask, mask);
          if (ok && ioctl (fd, SIOCSIFNETMASK, &ifr) < 0)
            ok = fail (error, size, "could not set the address of", ifname);
          if (ok)
            *changed |= CHANGED_ADDRESS;
        }
    }
  if (ok && !set_flags (fd, ifname, IFF_UP | IFF_RUNNING, 0))
    ok = fail (error, size, "could not bring up", ifname);
  /* A new address or a link taken down loses the default route: the
   * one there now is compared, and the one before tells what changed. */
  if (ok && default_gateway (ifname).s_addr != gateway.s_addr)
    {
      if (!replace_default_route (fd, ifname, want->gateway ? &gateway : NULL))
        ok = fail (error, size, "could not add the default route through", ifname);
      else if (gateway_before.s_addr != gateway.s_addr)
        *changed |= CHANGED_ROUTE;
    }
  close (fd);
  if (ok && want->dns.len > 0)
    ok = update_resolv_conf (&want->dns, changed, error, size);
  if (ok && (*changed & (CHANGED_MAC | CHANGED_ADDRESS | CHANGED_ROUTE | CHANGED_MTU)))
    agent_log ("network: %s is now %s (%s)%s%s", ifname, want->address, want->mac,
               want->gateway ? " via " : "", want->gateway ? want->gateway : "");
  return ok;
}
