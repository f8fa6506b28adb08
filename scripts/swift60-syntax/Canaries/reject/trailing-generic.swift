func f<T, >(_ t: T) {}
