/*
 * ns3_link - the ns-3 anchor of bench/emulator_bench.py.
 *
 * Bridges two existing network namespaces the way a QUIC Interop Runner style
 * ns-3 link would, so longlook-link can be compared with it on the same host:
 *
 *   client netns            ns-3 (real-time simulator)              server netns
 *   TAP DEV 198.18.0.1 -- FdNetDevice[A 198.18.0.2] =p2p= [B 198.19.0.2]FdNetDevice -- TAP DEV 198.19.0.1
 *
 * Node A and node B are IPv4 routers; the point-to-point link between them has
 * the given rate, one-way delay and a drop-tail device queue of QUEUE bytes in
 * each direction.  The default queue disc (FqCoDel) that ns-3 installs on
 * point-to-point devices is removed, so the device queue is the only queue.
 * IP checksums are computed and checked (GlobalValue ChecksumEnabled).
 *
 * The TAP devices are created here: the process enters each namespace with
 * setns(2), opens /dev/net/tun, and returns; they vanish when it exits.  The
 * caller sets addresses and routes (route to the far subnet via .0.2) after the
 * ready line {"ready": true} appears on stdout.  SIGTERM/SIGINT stop it; it then
 * prints {"summary": {...}} and exits 0.  It never runs longer than --maxSeconds.
 */
#include "ns3/core-module.h"
#include "ns3/fd-net-device-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <unistd.h>

using namespace ns3;

static volatile sig_atomic_t g_stop = 0;
static uint64_t g_queueDrops = 0;

static void OnSignal(int) { g_stop = 1; }

static void CheckStop()
{
    if (g_stop)
        Simulator::Stop();
    else
        Simulator::Schedule(MilliSeconds(20), &CheckStop);
}

static void OnQueueDrop(Ptr<const Packet>) { g_queueDrops++; }

/* Create TAP device `dev` inside /run/netns/`netns`; return its fd. */
static int OpenTapIn(const std::string& netns, const std::string& dev)
{
    int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    int target = open(("/run/netns/" + netns).c_str(), O_RDONLY | O_CLOEXEC);
    NS_ABORT_MSG_IF(self < 0 || target < 0, "cannot open netns " << netns << ": " << strerror(errno));
    NS_ABORT_MSG_IF(setns(target, CLONE_NEWNET) < 0, "setns " << netns << ": " << strerror(errno));
    int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
    NS_ABORT_MSG_IF(fd < 0, "open /dev/net/tun: " << strerror(errno));
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
    strncpy(ifr.ifr_name, dev.c_str(), IFNAMSIZ - 1);
    NS_ABORT_MSG_IF(ioctl(fd, TUNSETIFF, &ifr) < 0, "TUNSETIFF " << dev << ": " << strerror(errno));
    NS_ABORT_MSG_IF(setns(self, CLONE_NEWNET) < 0, "setns back: " << strerror(errno));
    close(self);
    close(target);
    return fd;
}

static void RemoveQueueDisc(Ptr<NetDevice> dev)
{
    Ptr<TrafficControlLayer> tc = dev->GetNode()->GetObject<TrafficControlLayer>();
    if (tc && tc->GetRootQueueDiscOnDevice(dev))
        tc->DeleteRootQueueDiscOnDevice(dev);
}

static void PrintReady()
{
    std::printf("{\"ready\": true, \"pid\": %d}\n", getpid());
    std::fflush(stdout);
}

int main(int argc, char* argv[])
{
    std::string clientNetns, serverNetns, dev = "lt0", rate = "1Gbps";
    uint32_t delayUs = 10000, queueBytes = 2500000, maxSeconds = 600;
    CommandLine cmd(__FILE__);
    cmd.AddValue("clientNetns", "client namespace (name under /run/netns)", clientNetns);
    cmd.AddValue("serverNetns", "server namespace (name under /run/netns)", serverNetns);
    cmd.AddValue("dev", "TAP device name in both namespaces", dev);
    cmd.AddValue("rate", "point-to-point data rate, e.g. 1Gbps", rate);
    cmd.AddValue("delayUs", "one-way delay of the point-to-point channel in us", delayUs);
    cmd.AddValue("queueBytes", "drop-tail device queue per direction in bytes", queueBytes);
    cmd.AddValue("maxSeconds", "stop after this many seconds at the latest", maxSeconds);
    cmd.Parse(argc, argv);
    NS_ABORT_MSG_IF(clientNetns.empty() || serverNetns.empty(), "--clientNetns and --serverNetns are required");

    // TAPs first: setns must happen before ns-3 starts any thread.
    int tapA = OpenTapIn(clientNetns, dev);
    int tapB = OpenTapIn(serverNetns, dev);

    GlobalValue::Bind("SimulatorImplementationType", StringValue("ns3::RealtimeSimulatorImpl"));
    GlobalValue::Bind("ChecksumEnabled", BooleanValue(true));

    NodeContainer nodes;
    nodes.Create(2);

    PointToPointHelper p2p;
    p2p.SetDeviceAttribute("DataRate", StringValue(rate));
    p2p.SetChannelAttribute("Delay", TimeValue(MicroSeconds(delayUs)));
    p2p.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize",
                 QueueSizeValue(QueueSize(QueueSizeUnit::BYTES, queueBytes)));
    NetDeviceContainer link = p2p.Install(nodes);

    FdNetDeviceHelper fdh; // DIX encapsulation: a TAP with IFF_NO_PI carries plain Ethernet frames
    NetDeviceContainer taps = fdh.Install(nodes);
    taps.Get(0)->GetObject<FdNetDevice>()->SetFileDescriptor(tapA);
    taps.Get(1)->GetObject<FdNetDevice>()->SetFileDescriptor(tapB);

    InternetStackHelper internet;
    internet.Install(nodes);
    Ipv4AddressHelper addr;
    addr.SetBase("198.18.0.0", "255.255.255.0", "0.0.0.2");
    addr.Assign(NetDeviceContainer(taps.Get(0)));
    addr.SetBase("198.19.0.0", "255.255.255.0", "0.0.0.2");
    addr.Assign(NetDeviceContainer(taps.Get(1)));
    addr.SetBase("198.19.255.0", "255.255.255.252");
    addr.Assign(link); // A = 198.19.255.1, B = 198.19.255.2

    // Ipv4AddressHelper installed FqCoDel on the p2p devices: take it off everywhere.
    for (uint32_t i = 0; i < 2; i++)
    {
        RemoveQueueDisc(link.Get(i));
        RemoveQueueDisc(taps.Get(i));
        Ptr<PointToPointNetDevice> p = link.Get(i)->GetObject<PointToPointNetDevice>();
        p->GetQueue()->TraceConnectWithoutContext("Drop", MakeCallback(&OnQueueDrop));
    }

    Ipv4StaticRoutingHelper srh;
    srh.GetStaticRouting(nodes.Get(0)->GetObject<Ipv4>())
        ->AddNetworkRouteTo(Ipv4Address("198.19.0.0"), Ipv4Mask("255.255.255.0"), Ipv4Address("198.19.255.2"),
                            nodes.Get(0)->GetObject<Ipv4>()->GetInterfaceForDevice(link.Get(0)));
    srh.GetStaticRouting(nodes.Get(1)->GetObject<Ipv4>())
        ->AddNetworkRouteTo(Ipv4Address("198.18.0.0"), Ipv4Mask("255.255.255.0"), Ipv4Address("198.19.255.1"),
                            nodes.Get(1)->GetObject<Ipv4>()->GetInterfaceForDevice(link.Get(1)));

    std::signal(SIGTERM, OnSignal);
    std::signal(SIGINT, OnSignal);
    Simulator::ScheduleNow(&PrintReady);
    Simulator::ScheduleNow(&CheckStop);
    Simulator::Stop(Seconds(maxSeconds));
    Simulator::Run();
    std::printf("{\"summary\": {\"queue_drops\": %llu, \"sim_seconds\": %.3f}}\n",
                (unsigned long long)g_queueDrops, Simulator::Now().GetSeconds());
    std::fflush(stdout);
    Simulator::Destroy();
    return 0;
}
