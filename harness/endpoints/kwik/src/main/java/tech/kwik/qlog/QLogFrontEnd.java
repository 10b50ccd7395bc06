package tech.kwik.qlog;

import java.time.Instant;
import java.util.List;

import longlook.kwik.Qlog;
import tech.kwik.core.log.QLog;
import tech.kwik.core.packet.QuicPacket;

/**
 * The class kwik's server loads by name for each connection's qlog (LogProxy looks up
 * tech.kwik.qlog.QLogFrontEnd with a (byte[] original DCID) constructor; kwik's own
 * qlog module, which would supply it, is not on Maven Central). Ours hands every call
 * to longlook.kwik.Qlog.
 */
public final class QLogFrontEnd implements QLog {
    private final QLog to;

    public QLogFrontEnd(byte[] originalDcid) {
        to = Qlog.open("server", originalDcid);
    }

    @Override public void emitConnectionCreatedEvent(Instant t) { to.emitConnectionCreatedEvent(t); }
    @Override public void emitPacketSentEvent(QuicPacket p, Instant t) { to.emitPacketSentEvent(p, t); }
    @Override public void emitPacketSentEvent(List<QuicPacket> ps, Instant t) { to.emitPacketSentEvent(ps, t); }
    @Override public void emitPacketReceivedEvent(QuicPacket p, Instant t) { to.emitPacketReceivedEvent(p, t); }
    @Override public void emitPacketLostEvent(QuicPacket p, Instant t) { to.emitPacketLostEvent(p, t); }
    @Override public void emitConnectionTerminatedEvent() { to.emitConnectionTerminatedEvent(); }
    @Override public void emitCongestionControlMetrics(long w, long f) { to.emitCongestionControlMetrics(w, f); }
    @Override public void emitRttMetrics(int s, int v, int l) { to.emitRttMetrics(s, v, l); }
    @Override public void emitRecoveryMetrics(long w, long f, int s, int v, int l) { to.emitRecoveryMetrics(w, f, s, v, l); }
    @Override public void emitConnectionClosedEvent(Instant t) { to.emitConnectionClosedEvent(t); }
    @Override public void emitConnectionClosedEvent(Instant t, long c, String r) { to.emitConnectionClosedEvent(t, c, r); }
}
