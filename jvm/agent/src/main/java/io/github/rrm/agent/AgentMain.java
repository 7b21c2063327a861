package io.github.rrm.agent;

import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.lang.instrument.Instrumentation;
import java.security.ProtectionDomain;
import java.util.Properties;

import net.bytebuddy.agent.builder.AgentBuilder;
import net.bytebuddy.asm.Advice;
import net.bytebuddy.description.type.TypeDescription;
import net.bytebuddy.dynamic.DynamicType;
import net.bytebuddy.matcher.ElementMatchers;
import net.bytebuddy.utility.JavaModule;

/**
 * The agent attached with {@code -javaagent:rocketmq-rebalance-agent-<version>-javaagent.jar[=settings]}: every
 * {@code DefaultMQProducer} and {@code DefaultMQPushConsumer} the application starts is registered with one
 * {@link RebalanceAgent} as it starts, with no change to the application. Settings (docs/client-agent.md), later
 * ones winning: a properties file ({@code config=<path>} or {@code -Drrm.agent.config=<path>}), the
 * {@code -Drrm.agent.*} system properties, the agent's arguments ({@code name=value,name=value}; a piece
 * without {@code =} continues the previous value, so {@code bootstrap.servers=a:9092,b:9092} works).
 */
public final class AgentMain {
    static final String CONFIG = "config";

    private AgentMain() {
    }

    public static void premain(String arguments, Instrumentation instrumentation) {
        try {
            AutoRegistration.configure(AgentConfig.fromProperties(settings(arguments, System.getProperties())));
            install(instrumentation);
        } catch (Throwable t) {  // a bad setting or a missing class: the application runs without the agent
            System.err.println("rocketmq-rebalance-agent: not attached: " + t);
        }
    }

    /**
     * The {@code rrm.agent.*} settings from the file, the system properties and the agent's arguments.
     * Names in the file and the arguments may leave out the {@code rrm.agent.} prefix.
     */
    public static Properties settings(String arguments, Properties system) throws IOException {
        Properties fromArguments = parseArguments(arguments);
        String file = fromArguments.getProperty(AgentConfig.PREFIX + CONFIG,
            system.getProperty(AgentConfig.PREFIX + CONFIG));
        Properties out = new Properties();
        if (file != null) {
            Properties fromFile = new Properties();
            InputStream in = new FileInputStream(file.trim());
            try {
                fromFile.load(in);
            } finally {
                in.close();
            }
            putPrefixed(out, fromFile, false);
        }
        putPrefixed(out, system, true);
        out.putAll(fromArguments);
        out.remove(AgentConfig.PREFIX + CONFIG);
        return out;
    }

    static Properties parseArguments(String arguments) {
        Properties out = new Properties();
        if (arguments == null || arguments.trim().isEmpty()) {
            return out;
        }
        String name = null;
        StringBuilder value = new StringBuilder();
        for (String piece : arguments.split(",")) {
            int eq = piece.indexOf('=');
            if (eq < 0 && name != null) {
                value.append(',').append(piece);
                continue;
            }
            if (eq < 0) {
                throw new IllegalArgumentException("agent argument without a value: " + piece);
            }
            if (name != null) {
                out.setProperty(prefixed(name), value.toString().trim());
            }
            name = piece.substring(0, eq).trim();
            value.setLength(0);
            value.append(piece.substring(eq + 1));
        }
        out.setProperty(prefixed(name), value.toString().trim());
        return out;
    }

    private static void putPrefixed(Properties out, Properties in, boolean onlyPrefixed) {
        for (String name : in.stringPropertyNames()) {
            if (onlyPrefixed && !name.startsWith(AgentConfig.PREFIX)) {
                continue;  // the JVM's other properties
            }
            out.setProperty(prefixed(name), in.getProperty(name));
        }
    }

    private static String prefixed(String name) {
        return name.startsWith(AgentConfig.PREFIX) ? name : AgentConfig.PREFIX + name;
    }

    /** Exit advice on both clients' {@code start()}: a client that started is registered. */
    private static void install(Instrumentation instrumentation) {
        new AgentBuilder.Default()
            .disableClassFormatChanges()
            .with(AgentBuilder.RedefinitionStrategy.RETRANSFORMATION)
            .type(ElementMatchers.named("org.apache.rocketmq.client.producer.DefaultMQProducer"))
            .transform(onStart(ProducerStarted.class))
            .type(ElementMatchers.named("org.apache.rocketmq.client.consumer.DefaultMQPushConsumer"))
            .transform(onStart(PushConsumerStarted.class))
            .installOn(instrumentation);
    }

    private static AgentBuilder.Transformer onStart(final Class<?> advice) {
        return new AgentBuilder.Transformer() {
            @Override
            public DynamicType.Builder<?> transform(DynamicType.Builder<?> builder, TypeDescription type,
                ClassLoader loader, JavaModule module, ProtectionDomain domain) {
                return builder.visit(Advice.to(advice)
                    .on(ElementMatchers.named("start").and(ElementMatchers.takesArguments(0))));
            }
        };
    }

    /** Inlined at the end of {@code DefaultMQProducer.start()}; what it throws is dropped. */
    public static final class ProducerStarted {
        private ProducerStarted() {
        }

        @Advice.OnMethodExit(suppress = Throwable.class)
        public static void started(@Advice.This Object producer) {
            AutoRegistration.producerStarted(producer);
        }
    }

    /** Inlined at the end of {@code DefaultMQPushConsumer.start()}; what it throws is dropped. */
    public static final class PushConsumerStarted {
        private PushConsumerStarted() {
        }

        @Advice.OnMethodExit(suppress = Throwable.class)
        public static void started(@Advice.This Object consumer) {
            AutoRegistration.pushConsumerStarted(consumer);
        }
    }
}
