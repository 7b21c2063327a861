package io.github.rrm.testclients;

import java.lang.reflect.Field;
import java.lang.reflect.Method;

/** Private fields and version-dependent methods of the RocketMQ client, read the same way in both lines. */
final class Reflect {
    private Reflect() {
    }

    static Object field(Object target, String name) {
        for (Class<?> c = target.getClass(); c != null; c = c.getSuperclass()) {
            try {
                Field f = c.getDeclaredField(name);
                f.setAccessible(true);
                return f.get(target);
            } catch (NoSuchFieldException e) {
                // look in the superclass
            } catch (IllegalAccessException e) {
                throw new IllegalStateException(e);
            }
        }
        throw new IllegalArgumentException(target.getClass().getName() + " has no field " + name);
    }

    static boolean hasField(Object target, String name) {
        for (Class<?> c = target.getClass(); c != null; c = c.getSuperclass()) {
            try {
                c.getDeclaredField(name);
                return true;
            } catch (NoSuchFieldException e) {
                // look in the superclass
            }
        }
        return false;
    }

    static Object call(Object target, String name, Object... args) {
        for (Method m : target.getClass().getMethods()) {
            if (m.getName().equals(name) && m.getParameterTypes().length == args.length) {
                try {
                    m.setAccessible(true);
                    return m.invoke(target, args);
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            }
        }
        throw new IllegalArgumentException(target.getClass().getName() + " has no method " + name);
    }

    /** An enum constant by class name: the class's package differs between the client lines. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static Object enumConstant(String[] classNames, String constant) {
        for (String className : classNames) {
            try {
                Class cls = Class.forName(className);
                return Enum.valueOf(cls, constant);
            } catch (ClassNotFoundException e) {
                // the other line's package
            }
        }
        throw new IllegalArgumentException("none of the classes exists: " + String.join(", ", classNames));
    }
}
