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
