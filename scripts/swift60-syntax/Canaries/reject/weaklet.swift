final class A { weak let x: AnyObject? }
