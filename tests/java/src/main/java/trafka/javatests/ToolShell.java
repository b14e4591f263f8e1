package trafka.javatests;

import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.kafka.common.utils.internals.Exit;

/**
 * Runs Kafka's CLI tools through their main classes, many in one JVM (a JVM start costs
 * seconds on the test machine).
 *
 * <p>Each request is one line on stdin: {@code MAIN_CLASS \t STDIN_BASE64_OR_- \t ARG \t ARG...}.
 * The tool's {@code main(String[])} runs exactly as {@code kafka-run-class.sh MAIN_CLASS ARGS}
 * would run it, with System.in/out/err swapped for buffers and Kafka's {@code Exit} procedure
 * turned into an exception (the tools end through {@code Exit.exit(code)}, never
 * System.exit). The answer is one JSON line on the real stdout: {@code {"exit": N, "out":
 * "...", "err": "..."}}.
 */
public final class ToolShell {
    private static final class ExitCalled extends RuntimeException {
        final int code;

        ExitCalled(int code) {
            super("exit " + code, null, false, false);
            this.code = code;
        }
    }

    private static volatile Integer firstExit;

    public static void main(String[] argv) throws Exception {
        PrintStream realOut = System.out;
        PrintStream realErr = System.err;
        InputStream realIn = System.in;
        PrintStream discard = new PrintStream(OutputStream.nullOutputStream());
        // A real JVM ends at the first Exit.exit: keep its code, drop what the tool prints
        // after it (a tool that catches Throwable would otherwise print the exception).
        Exit.Procedure onExit = (code, message) -> {
            if (firstExit == null) firstExit = code;
            System.setOut(discard);
            System.setErr(discard);
            throw new ExitCalled(code);
        };
        Exit.setExitProcedure(onExit);
        Exit.setHaltProcedure(onExit);
        Exit.setShutdownHookAdder((name, hook) -> {});
        BufferedReader requests =
                new BufferedReader(new InputStreamReader(realIn, StandardCharsets.UTF_8));
        realOut.println(Json.write(Map.of("ready", true)));
        realOut.flush();
        String line;
        while ((line = requests.readLine()) != null) {
            if (line.isBlank()) continue;
            String[] fields = line.split("\t", -1);
            String mainClass = fields[0];
            byte[] input = fields[1].equals("-") ? new byte[0] : Base64.getDecoder().decode(fields[1]);
            String[] args = Arrays.copyOfRange(fields, 2, fields.length);
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            ByteArrayOutputStream err = new ByteArrayOutputStream();
            int code = 0;
            firstExit = null;
            long started = System.nanoTime();
            try (PrintStream toolOut = new PrintStream(out, true, StandardCharsets.UTF_8);
                    PrintStream toolErr = new PrintStream(err, true, StandardCharsets.UTF_8)) {
                System.setOut(toolOut);
                System.setErr(toolErr);
                System.setIn(new ByteArrayInputStream(input));
                try {
                    Method main = Class.forName(mainClass).getMethod("main", String[].class);
                    main.invoke(null, (Object) args);
                } catch (InvocationTargetException e) {
                    Throwable cause = e.getCause();
                    if (cause instanceof ExitCalled exit) {
                        code = exit.code;
                    } else {
                        cause.printStackTrace(toolErr);
                        code = 1;
                    }
                } catch (ExitCalled exit) {
                    code = exit.code;
                } catch (Throwable t) {
                    t.printStackTrace(toolErr);
                    code = 1;
                }
            } finally {
                System.setOut(realOut);
                System.setErr(realErr);
                System.setIn(realIn);
            }
            if (firstExit != null) code = firstExit;
            Map<String, Object> answer = new LinkedHashMap<>();
            answer.put("exit", code);
            answer.put("out", out.toString(StandardCharsets.UTF_8));
            answer.put("err", err.toString(StandardCharsets.UTF_8));
            answer.put("ms", (System.nanoTime() - started) / 1_000_000);
            realOut.println(Json.write(answer));
            realOut.flush();
        }
    }
}
