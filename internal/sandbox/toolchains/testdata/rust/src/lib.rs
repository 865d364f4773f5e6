//! A reverse Polish notation calculator over i64.

include!(concat!(env!("OUT_DIR"), "/operators.rs"));

/// Why an expression could not be evaluated.
#[derive(Debug, PartialEq, Eq)]
pub enum Error {
    BadToken(String),
    StackUnderflow,
    DivisionByZero,
    Leftover(usize),
}

/// Evaluates a whitespace-separated RPN expression.
pub fn eval(expr: &str) -> Result<i64, Error> {
    let mut stack: Vec<i64> = Vec::new();
    for token in expr.split_whitespace() {
        let op = token.chars().next().filter(|c| token.len() == 1 && OPERATORS.contains(c));
        match op {
            Some(op) => {
                let b = stack.pop().ok_or(Error::StackUnderflow)?;
                let a = stack.pop().ok_or(Error::StackUnderflow)?;
                stack.push(match op {
                    '+' => a + b,
                    '-' => a - b,
                    '*' => a * b,
                    _ => {
                        if b == 0 {
                            return Err(Error::DivisionByZero);
                        }
                        a / b
                    }
                });
            }
            None => stack.push(token.parse().map_err(|_| Error::BadToken(token.to_string()))?),
        }
    }
    match stack.len() {
        1 => Ok(stack[0]),
        0 => Err(Error::StackUnderflow),
        n => Err(Error::Leftover(n - 1)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evaluates() {
        assert_eq!(eval("3 4 +"), Ok(7));
        assert_eq!(eval("5 1 2 + 4 * + 3 -"), Ok(14));
        assert_eq!(eval("-7 2 /"), Ok(-3));
    }

    #[test]
    fn refuses_bad_input() {
        assert_eq!(eval("1 +"), Err(Error::StackUnderflow));
        assert_eq!(eval("1 0 /"), Err(Error::DivisionByZero));
        assert_eq!(eval("1 2"), Err(Error::Leftover(1)));
        assert_eq!(eval("1 x +"), Err(Error::BadToken("x".into())));
    }
}
