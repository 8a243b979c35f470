// The oracle for rondo's Quartz cron engine: Quartz 2.3's own CronExpression
// (Debian's libquartz2-java) computes the fires rondo must reproduce.
//
// Reads lines `expression<TAB>zone<TAB>after<TAB>count` on stdin (after in
// epoch milliseconds or as an RFC 3339 instant) and answers each with one
// line: `OK<TAB>fire,fire,...` (fewer than count when the expression stops
// firing), `ERR<TAB>reason` when Quartz refuses the expression, or
// `THROW<TAB>exception` when Quartz accepts it and then fails. Fires are
// epoch milliseconds, or with `--iso` wall-clock times of the zone with
// their offset (2026-03-09T02:30:00-04:00).
//
//   java -cp "$(scripts/quartz-oracle/build.sh)" QuartzOracle [--iso] < cases
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.ZoneId;
import java.time.format.DateTimeFormatter;
import java.util.Date;
import java.util.TimeZone;
import org.quartz.CronExpression;

public class QuartzOracle {
    static final DateTimeFormatter ISO = DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ssXXX");
    static boolean iso = false;

    public static void main(String[] args) throws Exception {
        iso = args.length > 0 && args[0].equals("--iso");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        PrintWriter out = new PrintWriter(System.out);
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            String[] parts = line.split("\t", -1);
            long after = parts[2].contains("T")
                    ? OffsetDateTime.parse(parts[2]).toInstant().toEpochMilli()
                    : Long.parseLong(parts[2]);
            out.println(answer(parts[0], parts[1], after, Integer.parseInt(parts[3])));
        }
        out.flush();
    }

    static String answer(String expression, String zone, long after, int count) {
        CronExpression cron;
        try {
            cron = new CronExpression(expression);
        } catch (Exception e) {
            return "ERR\t" + String.valueOf(e.getMessage()).replace('\t', ' ').replace('\n', ' ');
        }
        cron.setTimeZone(TimeZone.getTimeZone(zone));
        StringBuilder fires = new StringBuilder();
        Date cursor = new Date(after);
        try {
            for (int i = 0; i < count; i++) {
                Date next = cron.getTimeAfter(cursor);
                if (next == null) {
                    break;
                }
                if (i > 0) {
                    fires.append(',');
                }
                if (iso) {
                    fires.append(Instant.ofEpochMilli(next.getTime()).atZone(ZoneId.of(zone)).format(ISO));
                } else {
                    fires.append(next.getTime());
                }
                cursor = next;
            }
        } catch (Exception e) {
            return "THROW\t" + e.getClass().getSimpleName() + ": " + String.valueOf(e.getMessage()).replace('\t', ' ');
        }
        return "OK\t" + fires;
    }
}
