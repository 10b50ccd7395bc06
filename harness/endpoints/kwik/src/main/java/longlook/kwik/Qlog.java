package longlook.kwik;

import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;

import tech.kwik.core.frame.AckFrame;
import tech.kwik.core.frame.QuicFrame;
import tech.kwik.core.frame.Range;
import tech.kwik.core.log.QLog;
import tech.kwik.core.packet.QuicPacket;

/**
 * One connection's qlog 0.3 trace (JSON-SEQ), from kwik's QLog hook: kwik publishes no
 * qlog writer on Maven Central, only the interface its connections call.
 *
 * <p>Mapping: emitPacketSentEvent / emitPacketReceivedEvent / emitPacketLostEvent to
 * transport:packet_sent, transport:packet_received (ACK frames with their ranges) and
 * recovery:packet_lost; emitCongestionControlMetrics (window, bytes in flight) and
 * emitRecoveryMetrics (the same and smoothed RTT, RTT variance, latest RTT, in whole ms
 * as kwik keeps them) to recovery:metrics_updated. kwik reports no congestion state, no
 * ssthresh, no loss trigger, no PTO count. Times are ms since the trace's
 * reference_time (the wall clock, at the connection's creation); the description gives
 * the same instant in CLOCK_MONOTONIC µs (System.nanoTime on Linux).
 */
public final class Qlog implements QLog {
    private final BufferedWriter out;
    private final Instant reference;

    private Qlog(BufferedWriter out, Instant reference) {
        this.out = out;
        this.reference = reference;
    }

    /** A trace in QLOGDIR named ROLE-ID.sqlog; a no-op QLog when QLOGDIR is unset or unwritable. */
    public static QLog open(String role, byte[] connectionId) {
        String dir = System.getenv("QLOGDIR");
        if (dir == null || dir.isEmpty()) {
            return new tech.kwik.core.log.NullQLog();
        }
        try {
            Files.createDirectories(Path.of(dir));
            Path file = Path.of(dir, role + "-" + Endpoint.hex(connectionId) + ".sqlog");
            BufferedWriter w = Files.newBufferedWriter(file, StandardCharsets.UTF_8);
            long monoUs = System.nanoTime() / 1000;
            Instant now = Instant.now();
            Qlog q = new Qlog(w, now);
            String title = "longlook kwik " + Endpoint.VERSION + " " + role;
            String desc = "reference_time_monotonic_us=" + monoUs;
            double refMs = now.getEpochSecond() * 1000.0 + now.getNano() / 1e6;
            q.line("{\"qlog_version\":\"0.3\",\"qlog_format\":\"JSON-SEQ\",\"title\":" + Json.str(title)
                    + ",\"description\":" + Json.str(desc) + ",\"trace\":{\"vantage_point\":{\"type\":\"" + role
                    + "\"},\"common_fields\":{\"reference_time\":" + refMs + ",\"time_format\":\"relative\"}}}");
            Endpoint.closeAtExit(w);
            return q;
        } catch (IOException e) {
            System.err.println("qlog: cannot create a trace in " + dir + ": " + e);
            return new tech.kwik.core.log.NullQLog();
        }
    }

    private synchronized void line(String json) {
        try {
            out.write('\u001e');
            out.write(json);
            out.write('\n');
        } catch (IOException e) {
            // The transfer goes on; the harness reports a trace cut short.
        }
    }

    private void event(Instant t, String name, String data) {
        double ms = (t.getEpochSecond() - reference.getEpochSecond()) * 1000.0
                + (t.getNano() - reference.getNano()) / 1e6;
        line("{\"time\":" + ms + ",\"name\":\"" + name + "\",\"data\":" + data + "}");
    }

    private static String header(QuicPacket p) {
        String type = switch (p.getEncryptionLevel()) {
            case Initial -> "initial";
            case Handshake -> "handshake";
            case ZeroRTT -> "0RTT";
            case App -> "1RTT";
        };
        return "{\"packet_type\":\"" + type + "\",\"packet_number\":" + p.getPacketNumber() + "}";
    }

    /** A frame's qlog name: kwik's class name in snake case, less "Frame". */
    static String frameType(QuicFrame f) {
        String n = f.getClass().getSimpleName().replace("Frame", "");
        if (n.equals("Padding")) {
            return "padding";
        }
        return n.replaceAll("([a-z])([A-Z])", "$1_$2").toLowerCase();
    }

    private static String frames(QuicPacket p) {
        List<String> fs = new ArrayList<>();
        for (QuicFrame f : p.getFrames()) {
            if (f instanceof AckFrame ack) {
                List<String> ranges = new ArrayList<>();
                for (Range r : ack.getAcknowledgedRanges()) {
                    ranges.add("[" + r.getSmallest() + "," + r.getLargest() + "]");
                }
                fs.add("{\"frame_type\":\"ack\",\"acked_ranges\":[" + String.join(",", ranges) + "]}");
            } else {
                fs.add("{\"frame_type\":\"" + frameType(f) + "\"}");
            }
        }
        return "[" + String.join(",", fs) + "]";
    }

    private void packet(String name, QuicPacket p, Instant t, boolean withSize) {
        if (p.getPacketNumber() == null) {
            return; // Retry, Version Negotiation: no packet number space
        }
        String raw = withSize ? ",\"raw\":{\"length\":" + p.getSize() + "}" : "";
        event(t, name, "{\"header\":" + header(p) + raw + ",\"frames\":" + frames(p) + "}");
    }

    @Override
    public void emitConnectionCreatedEvent(Instant t) {
    }

    @Override
    public void emitPacketSentEvent(QuicPacket p, Instant t) {
        packet("transport:packet_sent", p, t, true);
    }

    @Override
    public void emitPacketSentEvent(List<QuicPacket> ps, Instant t) {
        for (QuicPacket p : ps) {
            packet("transport:packet_sent", p, t, true);
        }
    }

    @Override
    public void emitPacketReceivedEvent(QuicPacket p, Instant t) {
        packet("transport:packet_received", p, t, true);
    }

    @Override
    public void emitPacketLostEvent(QuicPacket p, Instant t) {
        if (p.getPacketNumber() != null) {
            event(t, "recovery:packet_lost", "{\"header\":" + header(p) + "}");
        }
    }

    @Override
    public void emitConnectionTerminatedEvent() {
        flush();
    }

    @Override
    public void emitCongestionControlMetrics(long window, long inFlight) {
        event(Instant.now(), "recovery:metrics_updated",
                "{\"congestion_window\":" + window + ",\"bytes_in_flight\":" + inFlight + "}");
    }

    @Override
    public void emitRttMetrics(int smoothed, int variance, int latest) {
        event(Instant.now(), "recovery:metrics_updated",
                "{\"smoothed_rtt\":" + smoothed + ",\"rtt_variance\":" + variance + ",\"latest_rtt\":" + latest + "}");
    }

    @Override
    public void emitRecoveryMetrics(long window, long inFlight, int smoothed, int variance, int latest) {
        event(Instant.now(), "recovery:metrics_updated", "{\"congestion_window\":" + window + ",\"bytes_in_flight\":"
                + inFlight + ",\"smoothed_rtt\":" + smoothed + ",\"rtt_variance\":" + variance
                + ",\"latest_rtt\":" + latest + "}");
    }

    @Override
    public void emitConnectionClosedEvent(Instant t) {
        flush();
    }

    @Override
    public void emitConnectionClosedEvent(Instant t, long code, String reason) {
        flush();
    }

    private synchronized void flush() {
        try {
            out.flush();
        } catch (IOException e) {
            // nothing more to save
        }
    }
}
